//! `autotool demo`: offline, no key, one command. A scripted model (served on loopback by the
//! demo itself) plays an agent that needs a Hacker-News-like tool; a local fake API stands in
//! for the web.

pub mod fakes;
