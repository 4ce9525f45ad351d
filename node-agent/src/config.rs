//! The agent's configuration: the type and its loading are shared with the generator, which
//! writes it (`hardshift-agent-config`).

pub use hardshift_agent_config::{load, AgentToml as Config};
