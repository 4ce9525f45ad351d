//! The versioned wire contract `hardshift.agent.v1` between node agent and collector (issue: live node health).
