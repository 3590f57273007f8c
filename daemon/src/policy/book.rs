//! The operator's rules, per tenant: read from the rule files the daemon's configuration
//! names (`[policy] files` for every tenant, `policy_files` of a tenant for it alone) when the
//! daemon starts. A file that does not read, a rule that does not compile, or an inline
//! example that does not behave stops the start, naming the file, line and rule.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::rules::{Layer, Rule, RuleSet, file};

/// The largest rule file read: thousands of rules fit in a fraction of it.
const MAX_RULE_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Every tenant's operator layer.
#[derive(Debug, Default)]
pub struct PolicyBook {
    /// What applies to a tenant with no files of its own (the `default` tenant's).
    shared: Arc<RuleSet>,
    tenants: HashMap<String, Arc<RuleSet>>,
}

impl PolicyBook {
    /// Reads `shared` (for every tenant), then each tenant's own files after them.
    pub fn load(
        shared: &[PathBuf],
        tenants: &[(String, Vec<PathBuf>)],
    ) -> Result<PolicyBook, String> {
        let common = read_all(shared)?;
        let mut book = PolicyBook {
            shared: Arc::new(RuleSet::new(common.clone())),
            tenants: HashMap::new(),
        };
        for (tenant, files) in tenants {
            if files.is_empty() {
                continue;
            }
            let mut rules = common.clone();
            rules.extend(read_all(files)?);
            book.tenants
                .insert(tenant.clone(), Arc::new(RuleSet::new(rules)));
        }
        Ok(book)
    }

    /// The operator's rules for `tenant`.
    pub fn operator(&self, tenant: &str) -> Arc<RuleSet> {
        self.tenants.get(tenant).unwrap_or(&self.shared).clone()
    }

    /// How many rules there are in all, for the start's log.
    pub fn len(&self) -> usize {
        self.shared.rules().len()
            + self
                .tenants
                .values()
                .map(|set| set.rules().len())
                .sum::<usize>()
    }
}

fn read_all(files: &[PathBuf]) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for path in files {
        rules.extend(read(path)?);
    }
    Ok(rules)
}

fn read(path: &Path) -> Result<Vec<Rule>, String> {
    let shown = path.display().to_string();
    let size = std::fs::metadata(path)
        .map_err(|err| format!("policy file {shown}: {err}"))?
        .len();
    if size > MAX_RULE_FILE_BYTES {
        return Err(format!(
            "policy file {shown} is {size} bytes; rule files may be at most {MAX_RULE_FILE_BYTES}"
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|err| format!("policy file {shown}: {err}"))?;
    file::parse(&text, &shown, Layer::Operator).map_err(|err| format!("policy file {err}"))
}
