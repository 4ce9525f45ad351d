//! A bundle's whole build, owned here rather than by the CLI:
//!
//! 1. a [`Request`]: what to build, from flags or from what the bundle recorded ([`record`]);
//! 2. the [`inputs`], read and checked before anything is locked;
//! 3. the [`Live`] bundle, read once (under the lock when writing) into one type;
//! 4. [`make`]: a pure build from those, the clock, a key source and a password source;
//! 5. [`commit`]: one write of the bundle, and the record of how it was made.
//!
//! The decisions (reuse, re-issue, refuse, repair) are pure functions in [`decide`] and the PKI,
//! tested without a filesystem. The user's cache of the agent's encoding is injected ([`cache`]).

pub mod cache;
pub mod commit;
pub mod create;
pub mod decide;
pub mod error;
pub mod inputs;
pub mod live;
pub mod make;
pub mod outputs;
pub mod record;
pub mod render;
pub mod rendered;
pub mod request;
pub mod side;
#[cfg(test)]
mod tests;

pub use cache::{EncodingCache, NoCache, UserCache};
pub use create::{create, rebuild, Created};
pub use error::Error;
pub use live::Live;
pub use make::{Env, Made};
pub use record::{recorded, Record, Recorded};
pub use request::Request;
