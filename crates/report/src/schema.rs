//! JSON-Schema validation against `data/energy.schema.json` (feature `schema`), with
//! jsonschema-valid's terse messages ("Invalid type.") rewritten into "expected …, found …".

use std::sync::OnceLock;

use jsonschema_valid::{schemas::Draft, Config, ValidationError};
use serde_json::Value;

use crate::describe::{describe_schema, describe_value};
use crate::guard::{push_index, push_key};
use crate::{Issue, SCHEMA_JSON};

/// At most this many schema errors are reported for one document.
const MAX_SCHEMA_ERRORS: usize = 50;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::from_str(SCHEMA_JSON).expect("data/energy.schema.json is valid JSON (tested)")
    })
}

fn config() -> &'static Config<'static> {
    static CONFIG: OnceLock<Config<'static>> = OnceLock::new();
    CONFIG.get_or_init(|| {
        Config::from_schema(schema(), Some(Draft::Draft7))
            .expect("data/energy.schema.json compiles (tested)")
    })
}

/// The embedded schema, parsed once.
pub fn schema_value() -> &'static Value {
    schema()
}

/// Validate `instance` against the embedded schema.
pub fn schema_errors(instance: &Value) -> Vec<Issue> {
    let cfg = config();
    match cfg.validate(instance) {
        Ok(()) => Vec::new(),
        Err(errors) => {
            let mut out = Vec::new();
            for e in errors.take(MAX_SCHEMA_ERRORS) {
                out.extend(map_error(instance, &e));
            }
            out
        }
    }
}

/// `$`-rooted path of the instance fragment, telling array indices from object keys by looking
/// at the instance itself.
fn instance_path(root: &Value, e: &ValidationError) -> String {
    let mut p = String::from("$");
    let mut cur = Some(root);
    for comp in e.instance_path.iter().rev() {
        match cur {
            Some(Value::Array(a)) => match comp.parse::<usize>() {
                Ok(i) => {
                    push_index(&mut p, i);
                    cur = a.get(i);
                }
                Err(_) => {
                    push_key(&mut p, comp);
                    cur = None;
                }
            },
            Some(Value::Object(m)) => {
                push_key(&mut p, comp);
                cur = m.get(comp.as_str());
            }
            _ => {
                push_key(&mut p, comp);
                cur = None;
            }
        }
    }
    p
}

/// The schema object that holds the failing keyword (walk the schema path from the root).
fn parent_schema<'s>(root: &'s Value, e: &ValidationError) -> Option<(&'s Value, &'s str)> {
    let comps: Vec<&String> = e.schema_path.iter().rev().collect();
    let (keyword, parents) = comps.split_last()?;
    let mut cur = root;
    for c in parents {
        cur = match cur {
            Value::Object(m) => m.get(c.as_str())?,
            Value::Array(a) => a.get(c.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    let (k, _) = cur.as_object()?.get_key_value(keyword.as_str())?;
    Some((cur, k.as_str()))
}

fn map_error(root: &Value, e: &ValidationError) -> Vec<Issue> {
    let path = instance_path(root, e);
    let found = e
        .instance
        .as_ref()
        .map(describe_value)
        .unwrap_or_else(|| "nothing".to_string());
    let Some((parent, keyword)) = parent_schema(schema(), e) else {
        return vec![Issue::new(path, e.msg.clone())];
    };
    match keyword {
        "required" => {
            let obj = e.instance.as_ref().and_then(Value::as_object);
            let required = parent.get("required").and_then(Value::as_array);
            let missing: Vec<&str> = match (obj, required) {
                (Some(obj), Some(req)) => req
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|k| !obj.contains_key(*k))
                    .collect(),
                _ => Vec::new(),
            };
            if missing.is_empty() {
                return vec![Issue::new(path, e.msg.clone())];
            }
            missing
                .into_iter()
                .map(|k| {
                    let mut p = path.clone();
                    push_key(&mut p, k);
                    let expected = parent
                        .get("properties")
                        .and_then(|props| props.get(k))
                        .map(describe_schema)
                        .unwrap_or_else(|| "a value".to_string());
                    Issue::new(
                        p,
                        format!("missing required field `{k}`; expected {expected}"),
                    )
                })
                .collect()
        }
        "type" | "enum" | "const" | "minimum" | "maximum" | "exclusiveMinimum"
        | "exclusiveMaximum" | "pattern" | "minItems" | "maxItems" | "minLength" | "maxLength" => {
            vec![Issue::new(
                path,
                format!("expected {}, found {found}", describe_schema(parent)),
            )]
        }
        _ => vec![Issue::new(
            path,
            format!(
                "{} (found {found}); expected a value matching the schema",
                e.msg
            ),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_compiles_and_is_valid_draft7() {
        let cfg = config();
        assert!(cfg.validate_schema().is_ok());
        assert_eq!(cfg.get_draft_number(), 7);
    }

    #[test]
    fn messages_name_what_was_expected() {
        let mut v: Value =
            serde_json::from_str(include_str!("../../../data/examples/upstream-no-gpu.json"))
                .unwrap();
        v["workload"]["batch_size"] = json!("one");
        v["results"]["basis"] = json!("guessed");
        v["results"]["energy_per_token_mj"] = json!(-3);
        v["workload"].as_object_mut().unwrap().remove("model_name");
        let errs = schema_errors(&v);
        let find = |p: &str| {
            errs.iter()
                .find(|i| i.path == p)
                .unwrap_or_else(|| panic!("{p} in {errs:?}"))
                .message
                .clone()
        };
        assert_eq!(
            find("$.workload.batch_size"),
            "expected an integer ≥ 1, found the string \"one\""
        );
        assert!(find("$.results.basis").starts_with(
            "expected one of \"measured\", \"interpolated\", \"extrapolated\", \"unavailable\""
        ));
        assert_eq!(
            find("$.results.energy_per_token_mj"),
            "expected a number ≥ 0 or null, found the number -3"
        );
        assert_eq!(
            find("$.workload.model_name"),
            "missing required field `model_name`; expected a string"
        );
        assert_eq!(errs.len(), 4, "{errs:?}");
    }

    #[test]
    fn array_indices_in_paths() {
        let mut v: Value =
            serde_json::from_str(include_str!("../../../data/examples/upstream-no-gpu.json"))
                .unwrap();
        v["protocol"] = json!({"arms": [{"precision": "FP16", "status": "ok"}, {"precision": "NF4", "status": "crashed"}]});
        let errs = schema_errors(&v);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].path, "$.protocol.arms[1].status");
    }
}
