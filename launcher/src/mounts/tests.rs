//! Unit tests of the mount stage, through the recording MountSys.
