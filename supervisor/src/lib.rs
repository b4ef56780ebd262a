//! autotool supervisor library.
