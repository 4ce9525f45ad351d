//! Reading an MCO-rendered base: a bare Ignition config or a MachineConfig holding one.

use super::Config;
use crate::config::Broken;

/// The MachineConfig object of a rendered base, when the base is one (JSON or YAML); None for a
/// bare Ignition config. The machine-config server serves files made from it.
pub fn machine_config_of(text: &str) -> Option<serde_json::Value> {
    let v = crate::config::yaml::parse(text).ok()?.value;
    (v.get("kind").and_then(|k| k.as_str()) == Some("MachineConfig")).then_some(v)
}

/// Read an MCO-rendered base: an Ignition config, or a MachineConfig whose `spec.config`
/// (or `spec.config.raw`) holds one. JSON or YAML.
pub fn parse_base(text: &str) -> Result<Config, Broken> {
    let doc = crate::config::yaml::parse(text).map_err(|e| Broken(format!("line {}: {}", e.pos.line, e.message)))?;
    let mut v = doc.value;
    if v.get("kind").and_then(|k| k.as_str()) == Some("MachineConfig") {
        let cfg = v["spec"]["config"].take();
        v = match cfg.get("raw") {
            Some(serde_json::Value::String(s)) => serde_json::from_str(s).map_err(|e| Broken(format!("spec.config.raw: {e}")))?,
            Some(raw) => raw.clone(),
            None => cfg,
        };
    }
    let version = v["ignition"]["version"].as_str().unwrap_or("").to_string();
    if !version.starts_with("3.") {
        return Err(Broken(format!(
            "ignition.version is {version:?}; an Ignition 3.x config (or a MachineConfig holding one) is expected"
        )));
    }
    if v["ignition"]
        .get("config")
        .is_some_and(|c| c.get("merge").is_some() || c.get("replace").is_some())
    {
        return Err(Broken(
            "the base is a pointer config (ignition.config.merge/replace); give the rendered config itself".to_string(),
        ));
    }
    serde_json::from_value(v).map_err(|e| Broken(format!("not an Ignition config: {e}")))
}
