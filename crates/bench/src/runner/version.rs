//! nccl-tests' rules for the options that depend on the loaded NCCL: which of
//! `-R`, `-x`, `-D`, `-V` and `-d` it supports, and upstream's messages for what is changed or
//! ignored. Pure; the discover phase applies them as soon as the version is known, before any
//! device is touched.

use crate::error::{Error, Result};
use crate::gpu::Register;
use crate::options::Options;
use crate::types::DataType;

/// `-R`, `-x`, `-D`, `-V` and `-d` as the loaded NCCL supports them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settings {
    /// `-R` as the loaded NCCL supports it.
    pub register: Register,
    /// `-x` as the loaded NCCL supports it.
    pub cta_policy: Option<i64>,
    /// The datatypes to run: `-d all` without fp8 before NCCL 2.24.
    pub types: Vec<DataType>,
    /// Upstream's messages for what was changed or ignored (stderr, every process).
    pub messages: Vec<String>,
}

/// Applies nccl-tests' version rules: `-D` and `-V` need NCCL 2.28 (exit
/// 255), `-R` is ignored before 2.19 and `-R 2` falls back to local registration before 2.27,
/// `-x` is ignored before 2.27 and values above 1 before 2.28; `-d all` has no fp8 types before
/// 2.24 and an explicit fp8 type is refused there (exit 5; NCCL would reject it). The messages
/// are upstream's; they go to stderr rather than stdout, where their length would make them
/// look like table rows.
pub(super) fn settings(o: &Options, version: i32) -> Result<Settings> {
    if o.device_impl.is_some() && version < 22800 {
        return Err(Error::Usage(
            "Option -D (device implementation) requires NCCL >= 2.28.0".into(),
        ));
    }
    if o.device_cta_count.is_some() && version < 22800 {
        return Err(Error::Usage(
            "Option -V (device CTA count) requires NCCL >= 2.28.0".into(),
        ));
    }
    let fp8 = version >= 22400;
    if !fp8
        && !o.all_types
        && let Some(t) = o.types.iter().find(|t| t.is_fp8())
    {
        return Err(Error::Unsupported(format!(
            "-d {} needs NCCL 2.24 or later, but the loaded NCCL is {}",
            t.name(),
            version_name(version)
        )));
    }
    let types = o
        .types
        .iter()
        .copied()
        .filter(|t| fp8 || !t.is_fp8())
        .collect();
    let mut messages = Vec::new();
    let register = match o.register {
        Register::Off => Register::Off,
        _ if version < 21900 => {
            messages
                .push("Option -R (register) is not supported before NCCL 2.19. Ignoring".into());
            Register::Off
        }
        Register::Symmetric if version >= 22700 => Register::Symmetric,
        Register::Symmetric => {
            messages.push(
                "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting to local registration"
                    .into(),
            );
            Register::Local
        }
        Register::Local => Register::Local,
    };
    let cta_policy = match o.cta_policy {
        Some(_) if version < 22700 => {
            messages
                .push("Option -x (cta_policy) is not supported before NCCL 2.27. Ignoring".into());
            None
        }
        Some(p) if p > 1 && version < 22800 => {
            messages.push(format!(
                "Option -x (cta_policy) {p} is not supported before NCCL 2.28. Ignoring"
            ));
            None
        }
        p => p,
    };
    Ok(Settings {
        register,
        cta_policy,
        types,
        messages,
    })
}

/// `2.19.3` for the version code 21903.
pub(super) fn version_name(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_rules_of_registration_cta_policy_and_device_options() {
        let o = |f: fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            o
        };
        let sym = o(|o| o.register = Register::Symmetric);
        let s = settings(&sym, 22803).unwrap();
        assert_eq!((s.register, s.messages.len()), (Register::Symmetric, 0));
        let s = settings(&sym, 22605).unwrap();
        assert_eq!(s.register, Register::Local);
        assert_eq!(
            s.messages,
            [
                "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting to local registration"
            ]
        );
        assert_eq!(
            settings(&o(|o| o.register = Register::Local), 21900)
                .unwrap()
                .register,
            Register::Local
        );
        assert_eq!(
            settings(&Options::default(), 22803).unwrap().register,
            Register::Off
        );
        let zero = o(|o| o.cta_policy = Some(2));
        assert_eq!(settings(&zero, 22803).unwrap().cta_policy, Some(2));
        let s = settings(&zero, 22703).unwrap();
        assert_eq!(s.cta_policy, None);
        assert_eq!(
            s.messages,
            ["Option -x (cta_policy) 2 is not supported before NCCL 2.28. Ignoring"]
        );
        let eff = o(|o| o.cta_policy = Some(1));
        assert_eq!(settings(&eff, 22703).unwrap().cta_policy, Some(1));
        assert_eq!(settings(&eff, 22605).unwrap().cta_policy, None);
        let e = settings(&o(|o| o.device_impl = Some(0)), 22703).unwrap_err();
        assert_eq!(e.exit_code(), 255);
        assert_eq!(
            e.to_string(),
            "Option -D (device implementation) requires NCCL >= 2.28.0"
        );
        let e = settings(&o(|o| o.device_cta_count = Some(16)), 22703).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Option -V (device CTA count) requires NCCL >= 2.28.0"
        );
        assert!(settings(&o(|o| o.device_cta_count = Some(16)), 22800).is_ok());
    }

    #[test]
    fn version_rules_before_nccl_2_19_and_2_24() {
        let mut o = Options {
            register: Register::Symmetric,
            ..Options::default()
        };
        let s = settings(&o, 21701).unwrap();
        assert_eq!(s.register, Register::Off);
        assert_eq!(
            s.messages,
            ["Option -R (register) is not supported before NCCL 2.19. Ignoring"]
        );
        o.register = Register::Local;
        assert_eq!(settings(&o, 21805).unwrap().register, Register::Off);
        assert_eq!(settings(&o, 21903).unwrap().register, Register::Local);
        // -d all: fp8 only from 2.24 on.
        let all = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        assert_eq!(settings(&all, 22304).unwrap().types.len(), 10);
        assert_eq!(settings(&all, 22400).unwrap().types.len(), 12);
        // An explicit fp8 type: refused before 2.24 (exit 5), kept after.
        let f8 = Options {
            types: vec![DataType::F8e5m2],
            ..Options::default()
        };
        let e = settings(&f8, 21701).unwrap_err();
        assert_eq!(e.exit_code(), 5);
        assert_eq!(
            e.to_string(),
            "-d f8e5m2 needs NCCL 2.24 or later, but the loaded NCCL is 2.17.1"
        );
        assert_eq!(settings(&f8, 22803).unwrap().types, [DataType::F8e5m2]);
        assert_eq!(version_name(22803), "2.28.3");
    }
}
