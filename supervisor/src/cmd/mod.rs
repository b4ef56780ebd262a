//! The `autotool` command line ([`cli`]: the clap definitions, the dispatch, the exit codes and
//! JSON errors), one module per verb.

pub mod add;
pub mod cli;
pub mod config;
pub mod connect;
pub mod console;
#[cfg(feature = "own-model")]
pub mod demo;
pub mod dirs;
pub mod doctor;
pub mod events;
#[cfg(feature = "team")]
pub mod follow;
#[cfg(feature = "own-model")]
pub mod forge;
mod generated;
pub mod hosts;
pub mod import;
pub mod keys;
#[cfg(feature = "own-model")]
pub mod run;
pub mod runtime;
pub mod serve;
pub mod service;
pub mod setup;
#[cfg(feature = "own-model")]
pub mod setup_model;
#[cfg(feature = "team")]
pub mod team;
pub mod tools;

pub use cli::fail;
