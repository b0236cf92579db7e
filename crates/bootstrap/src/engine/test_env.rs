//! Test helpers shared by the engines' unit tests: an environment from pairs, and the engine
//! kind a launch with that environment gets.

use crate::launch::{Kind, Launch, detect};
use std::collections::HashMap;

/// An environment holding exactly `vars`.
pub fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

/// The engine a launch with `vars` starts through (a launch of another kind is a test failure).
pub fn kind_of(vars: &[(&str, &str)]) -> Kind {
    match detect(&env_of(vars), false) {
        Ok(Launch::Engine(e)) => e.kind,
        other => panic!("{vars:?}: {other:?}"),
    }
}
