//! End-to-end tests, compiled into one binary.
mod suite;
