//! End-to-end tests, compiled into one binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
