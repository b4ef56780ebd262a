//! Tools on disk that the registry does not know yet: a `tool.py` a user placed by hand, and the
//! tool directories `recover` walks.

use super::*;

impl Registry {
    /// `tools/<name>/tool.py` files a user placed by hand (regular files, valid names), sorted
    /// by name, except those whose code is already a version of that tool. The server verifies
    /// each like any other new tool ([`Registry::stage_from_file`]); changing the file makes it
    /// new code again, and so a new version once verified.
    pub fn hand_placed(&self) -> Result<Vec<(ToolName, PathBuf)>, RegistryError> {
        let mut found = Vec::new();
        for (name, dir) in self.tool_dirs()? {
            let file = dir.join(TOOL_FILE);
            match fs::symlink_metadata(&file) {
                Ok(m) if m.file_type().is_file() => {}
                _ => continue,
            }
            let code = match read_code(&file, self.code_limit) {
                Ok(c) => c,
                // Listed anyway: staging it reports the problem like any other bad tool.
                Err(RegistryError::CodeTooLarge { .. } | RegistryError::NotText(_)) => {
                    found.push((name, file));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !self
                .ledger
                .has_code(name.as_str(), &code_hash(code.as_bytes()))?
            {
                found.push((name, file));
            }
        }
        Ok(found)
    }

    /// `tools/<name>/` directories with a valid tool name ([`ToolName`]), sorted by name. A
    /// directory named otherwise (`foo__bar`, which would mount as a function of `foo`) is
    /// not a tool.
    pub(super) fn tool_dirs(&self) -> Result<Vec<(ToolName, PathBuf)>, RegistryError> {
        let tools = self.home.tools_dir();
        let entries = match fs::read_dir(&tools) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot list", &tools)(e)),
        };
        let mut dirs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("cannot list", &tools))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Ok(name) = ToolName::parse(&name)
                && entry.file_type().is_ok_and(|t| t.is_dir())
            {
                dirs.push((name, entry.path()));
            }
        }
        dirs.sort();
        Ok(dirs)
    }
}
