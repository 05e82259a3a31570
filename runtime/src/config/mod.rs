//! Configuration: every environment variable rshmem reads ([`env`](mod@env): the table, the checks and
//! the parsers of their values), the pure parsers several layers share ([`parse`]), and the typed
//! configuration of one init ([`Config`], in `settings`): init reads the environment once, checks every
//! variable and hands the result down to the layers. Nothing here imports another rshmem layer.

pub mod env;
pub mod parse;
mod settings;

pub use settings::{BackendKind, Config, IbgdaConfig, LogLevel, NetEnv, PeSet, ProxyConfig, TestHooks, Vars, NIC_HOOK, VERBS_HOOK};

/// The table of variables as `rshmrun --info` prints it, with the value each has in `vars`.
pub fn info_text(vars: &Vars) -> String {
    let mut s = String::from("Environment variables read by rshmem:\n\n");
    for v in env::VARS {
        let dflt = if v.default.is_empty() { "(unset)" } else { v.default };
        let cur = vars.lookup(v.name).map(|(n, c)| if n == v.name { format!("  [now: {c:?}]") } else { format!("  [now: {c:?}, as {n}]") }).unwrap_or_default();
        let alias = env::alias_of(v.name).map(|a| format!("\n    also read as {a} (NVSHMEM's name; {} wins when both are set)", v.name)).unwrap_or_default();
        s.push_str(&format!("{}\n    default: {dflt}{cur}\n    {}{alias}\n", v.name, v.meaning));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn info_lists_every_variable_and_alias_with_its_value() {
        let vars = super::Vars::from_pairs([("NVSHMEM_SYMMETRIC_SIZE", "2g"), ("RSHMEM_DEBUG", "info")]);
        let text = super::info_text(&vars);
        for v in super::env::VARS {
            assert!(text.contains(v.name), "--info does not list {}", v.name);
        }
        for (a, _) in super::env::ALIASES {
            assert!(text.contains(a), "--info does not list {a}");
        }
        assert!(text.contains("[now: \"info\"]") && text.contains("[now: \"2g\", as NVSHMEM_SYMMETRIC_SIZE]"), "{text}");
    }
}
