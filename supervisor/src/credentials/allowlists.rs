//! Allowlists: where each key may be sent, checked as the egress proxy reads them and stored
//! in their canonical form in `$AUTOTOOL_HOME/allowlists.json`.

use super::files::{read_optional, write_private};
use super::{CredError, KeyStore, check_name};
use std::collections::BTreeMap;

impl KeyStore {
    /// Limit where `name` may be sent to `hosts`; no hosts removes the limit. Each entry must
    /// parse as the egress proxy reads it ([`AllowRule::parse`]) and is stored in its canonical
    /// form (`API.Example.COM.` as `api.example.com`), duplicates dropped; one that does not
    /// parse refuses the whole list and nothing is stored. Returns the list as stored.
    ///
    /// [`AllowRule::parse`]: autotool_policy::hosts::AllowRule::parse
    pub fn allow(&self, name: &str, hosts: &[String]) -> Result<Vec<String>, CredError> {
        check_name(name)?;
        let mut list: Vec<String> = Vec::new();
        for host in hosts {
            let rule =
                autotool_policy::hosts::AllowRule::parse(host).map_err(CredError::BadHost)?;
            let canonical = rule.to_string();
            if !list.contains(&canonical) {
                list.push(canonical);
            }
        }
        let _lock = self.lock()?;
        let mut all = self.allowlists()?;
        if list.is_empty() {
            if all.remove(name).is_none() {
                return Ok(list);
            }
        } else {
            all.insert(name.to_owned(), list.clone());
        }
        let json = serde_json::to_vec_pretty(&all).map_err(|source| CredError::BadJson {
            path: self.allowlists_path(),
            source,
        })?;
        write_private(&self.allowlists_path(), &json)?;
        Ok(list)
    }

    /// Where `name` may be sent; `None` = no limit.
    pub fn allowlist(&self, name: &str) -> Result<Option<Vec<String>>, CredError> {
        check_name(name)?;
        Ok(self.allowlists()?.remove(name))
    }

    /// Every allowlist, by key name.
    pub fn allowlists(&self) -> Result<BTreeMap<String, Vec<String>>, CredError> {
        let path = self.allowlists_path();
        match read_optional(&path)? {
            None => Ok(BTreeMap::new()),
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| CredError::BadJson { path, source })
            }
        }
    }
}
