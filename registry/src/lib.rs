pub mod auth;
pub mod check;
pub mod client;
mod dirs;
pub mod extract;
pub mod mirror;
pub mod progress;
pub mod reference;
pub mod release;
