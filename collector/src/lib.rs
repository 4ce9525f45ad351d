//! The workstation side of the agent protocol (issue: live node health). Nothing here yet.
