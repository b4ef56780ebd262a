//! Integration tests against real outside parties, compiled into one binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
