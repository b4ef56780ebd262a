//! The `autotool` command line, one module per verb.

pub mod connect;
pub mod doctor;
pub mod keys;
pub mod serve;
pub mod service;
pub mod setup;
pub mod tools;
