//! Unit tests of the launch plan.
