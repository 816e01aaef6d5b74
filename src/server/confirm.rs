//! The person in the loop: `--confirm destructive` holds the calls that destroy (a delete, a
//! whole-note replacement, a folder move, a tag rename or its undo, a restore) until the person
//! says yes, and `--require-if-match` refuses a change that does not name the version it read.
//!
//! How the person is asked depends on the client:
//! - 2026-07-28 with elicitation: the call answers with `input_required` (the question, and an
//!   id as `requestState`); the client asks the person and calls again with the answer.
//! - An older protocol with elicitation: an `elicitation/create` request, awaited.
//! - No elicitation: a refusal (`confirmation_required`); the request waits in the state folder
//!   for `capvault confirm`, run by the person on the machine, and the same call made again
//!   goes ahead once.
//!
//! Never a silent yes: whatever the client does, a held call runs only after one of these.

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequiredResult, JsonObject,
    ProtocolVersion,
};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::Value;

use super::error::{Code, ToolError};
use crate::markdown::hidden::quoted_visible;
use crate::notes::write::confirm::ASK_TTL;
use crate::vault::{Vault, VaultPath};

/// The key of the one question in `inputRequests`.
const KEY: &str = "confirm";
/// The form's one field.
const FIELD: &str = "allow";

/// True when `--confirm destructive` holds this call (its internal tool name) for the person.
/// Dry runs are never held: they change nothing.
pub(super) fn held(vault: &Vault, tool: &str, args: &JsonObject) -> bool {
    if args.get("dry_run").and_then(Value::as_bool) == Some(true) {
        return false;
    }
    match tool {
        "delete_note" | "write_note" | "rename_tag" | "restore_note" => true,
        // Only a folder's move: a note's is undone by moving it back.
        "move_note" => args
            .get("from")
            .and_then(Value::as_str)
            .and_then(|f| VaultPath::parse_folder(f).ok())
            .is_some_and(|p| vault.check_folder(&p).is_ok()),
        _ => false,
    }
}

/// True when `--require-if-match` refuses this call: a tool taking `if_match` called without
/// it (a dry run changes nothing and passes).
pub(super) fn lacks_if_match(takes_if_match: bool, args: &JsonObject) -> bool {
    takes_if_match
        && args.get("dry_run").and_then(Value::as_bool) != Some(true)
        && args
            .get("if_match")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

/// The call's identity for its confirmation: the tool, its arguments (key order aside), the
/// credential and what its dry run found, hashed. Another call, the same call by another
/// credential, or the same call once the vault changed under it (another version to delete,
/// another diff) is another digest: a yes is for the change the person was shown.
pub(super) fn digest(
    tool: &str,
    args: &JsonObject,
    credential: Option<&str>,
    dry: &Value,
) -> String {
    fn canonical(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), canonical(v)))
                    .collect::<BTreeMap<_, _>>()
                    .into_iter()
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let mut args = args.clone();
    args.remove("dry_run");
    // The paths as the dry run resolved them, not as they were spelled: `Notes/A` and
    // `Notes/A.md` are one call, and a yes for one is a yes for the other.
    for key in ["path", "from", "to"] {
        if dry.get(key).is_some() {
            args.remove(key);
        }
    }
    let key = serde_json::json!([
        tool,
        canonical(&Value::Object(args)),
        credential,
        canonical(dry)
    ]);
    crate::vault::sha256_hex(key.to_string().as_bytes())
}

/// What the held call will change, for the person: from its arguments and its dry run's reply.
/// Vault-relative paths only; a few lines. Every value the client chose (a path, a tag, a batch)
/// is shown quoted and isolated, its invisible and bidi controls made visible
/// ([`quoted_visible`]): a path cannot fake a clause or reverse the count after it.
pub(super) fn summary(tool: &str, args: &JsonObject, dry: &Value) -> String {
    let s = |v: &Value, k: &str| quoted_visible(v.get(k).and_then(Value::as_str).unwrap_or("?"));
    let tag = |v: &Value, k: &str| {
        let t = v.get(k).and_then(Value::as_str).unwrap_or("?");
        quoted_visible(&format!("#{}", t.trim_start_matches('#')))
    };
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let lines = |v: &Value| {
        let diff = v.get("diff").and_then(Value::as_str).unwrap_or("");
        let (mut plus, mut minus) = (0, 0);
        for l in diff.lines() {
            if l.starts_with("+++") || l.starts_with("---") {
                continue;
            }
            if l.starts_with('+') {
                plus += 1;
            } else if l.starts_with('-') {
                minus += 1;
            }
        }
        format!("{} added, {minus} removed", counted(plus, "line", "lines"))
    };
    match tool {
        "delete_note" => {
            let path = s(dry, "path");
            if dry.get("permanent").and_then(Value::as_bool) == Some(true) {
                format!("Delete {path} for good (it will not be in the vault's trash).")
            } else {
                format!("Delete {path} (to the vault's trash).")
            }
        }
        "write_note" => format!(
            "Replace the whole text of {} ({}).",
            s(dry, "path"),
            lines(dry)
        ),
        "restore_note" => format!(
            "Restore {} to an earlier version ({}).",
            s(dry, "path"),
            lines(dry)
        ),
        "move_note" => format!(
            "Move the folder {} to {}: {}, {} rewritten in other notes.",
            s(dry, "from"),
            s(dry, "to"),
            counted(n(dry, "files_moved"), "file", "files"),
            counted(n(dry, "links_updated"), "link", "links")
        ),
        "rename_tag" => {
            let notes = dry
                .get("notes")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let notes = counted(notes as u64, "note", "notes");
            let places = counted(n(dry, "occurrences"), "place", "places");
            match args.get("undo").and_then(Value::as_str) {
                Some(batch) => format!(
                    "Undo the tag rename {}: {notes} change back ({places}).",
                    quoted_visible(batch)
                ),
                None => format!(
                    "Rename the tag {} to {} in {notes} ({places}).",
                    tag(dry, "from"),
                    tag(dry, "to"),
                ),
            }
        }
        other => format!("Run {}.", quoted_visible(other)),
    }
}

/// `n` and the noun it counts: `1 note`, `2 notes`, `0 notes`.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The vault paths a held call acts on that must still exist for it to make sense (a note to
/// delete or replace, a folder to move), as its dry run resolved them: a request whose path is
/// gone since is dropped rather than asked about (`capvault confirm`).
pub(super) fn needs(tool: &str, dry: &Value) -> Vec<String> {
    let key = match tool {
        "delete_note" => "path",
        "write_note" if dry.get("created").and_then(Value::as_bool) != Some(true) => "path",
        "move_note" => "from",
        _ => return Vec::new(),
    };
    dry.get(key)
        .and_then(Value::as_str)
        .map(|p| vec![p.to_owned()])
        .unwrap_or_default()
}

/// The question put to the person.
fn question(vault: &str, summary: &str) -> (String, ElicitationSchema) {
    let message = format!(
        "An assistant wants to change your vault {}:\n\n{summary}\n\nAllow this change?",
        quoted_visible(vault)
    );
    let schema = ElicitationSchema::builder()
        .required_bool_property(FIELD, |b| b.title("Allow this change").with_default(false))
        .build_unchecked();
    (message, schema)
}

/// How the person answered.
pub(super) enum Answer {
    Yes,
    /// Declined, cancelled or dismissed: what the refusal says.
    No(&'static str),
}

/// Reads an elicitation result: yes only for `accept` with the field set to true.
fn decide(result: &ElicitResult) -> Answer {
    match result.action {
        ElicitationAction::Accept => {
            let yes = result
                .content
                .as_ref()
                .and_then(|c| c.get(FIELD))
                .and_then(Value::as_bool)
                == Some(true);
            if yes {
                Answer::Yes
            } else {
                Answer::No("the person did not allow the change")
            }
        }
        ElicitationAction::Decline => Answer::No("the person declined the change"),
        _ => Answer::No("the person dismissed the question"),
    }
}

/// The refusal for a change the person did not allow.
pub(super) fn declined(why: &str, summary: &str) -> ToolError {
    ToolError::new(
        Code::Declined,
        format!("{why}; nothing was changed. (The change: {summary})"),
    )
}

/// What a 2026-07-28 client's retry carries: the answer to the question `request_state` names.
pub(super) fn answer_of(request: &CallToolRequestParams) -> Option<Answer> {
    let response = request.input_responses.as_ref()?.get(KEY)?;
    Some(
        match serde_json::from_value::<ElicitResult>(response.clone()) {
            Ok(r) => decide(&r),
            Err(_) => Answer::No("the client's answer could not be read"),
        },
    )
}

/// How this client can be asked.
pub(super) enum Channel {
    /// 2026-07-28: return the question; the retry brings the answer.
    InputRequired,
    /// An older protocol: ask in a request of our own.
    Request,
    /// No elicitation declared.
    None,
}

pub(super) fn channel(context: &RequestContext<RoleServer>) -> Channel {
    let modern = context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    let declared = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    match (declared, modern) {
        (false, _) => Channel::None,
        (true, true) => Channel::InputRequired,
        (true, false) => {
            if context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
            {
                Channel::Request
            } else {
                Channel::None
            }
        }
    }
}

/// The `input_required` reply asking the question `id` names.
pub(super) fn input_required(vault: &str, summary: &str, id: String) -> CallToolResponse {
    let (message, requested_schema) = question(vault, summary);
    let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    });
    let mut requests = BTreeMap::new();
    requests.insert(KEY.to_owned(), InputRequest::Elicitation(request));
    InputRequiredResult::new(Some(requests), Some(id)).into()
}

/// Asks the person through an `elicitation/create` request (protocols before 2026-07-28).
pub(super) async fn ask(
    context: &RequestContext<RoleServer>,
    vault: &str,
    summary: &str,
) -> Answer {
    let (message, requested_schema) = question(vault, summary);
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    };
    match context
        .peer
        .create_elicitation_with_timeout(params, Some(ASK_TTL))
        .await
    {
        Ok(result) => decide(&result),
        Err(e) => {
            tracing::warn!(error = %e, "the client did not answer the confirmation");
            Answer::No("the client did not bring back the person's answer")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_digest_names_the_call_whatever_the_key_order_but_not_another_call() {
        let a = obj(serde_json::json!({"path": "A.md", "permanent": true}));
        let b = obj(serde_json::json!({"permanent": true, "path": "A.md", "dry_run": true}));
        let c = obj(serde_json::json!({"path": "B.md", "permanent": true}));
        let dry = serde_json::json!({"path": "A.md", "sha256": "1"});
        let d = |tool, args, cred, dry| digest(tool, args, cred, dry);
        assert_eq!(
            d("delete_note", &a, None, &dry),
            d("delete_note", &b, None, &dry)
        );
        // Another note: its dry run names it.
        let dry_c = serde_json::json!({"path": "B.md", "sha256": "1"});
        assert_ne!(
            d("delete_note", &a, None, &dry),
            d("delete_note", &c, None, &dry_c)
        );
        assert_ne!(
            d("delete_note", &a, None, &dry),
            d("delete_note", &a, Some("token-1"), &dry)
        );
        assert_ne!(
            d("delete_note", &a, None, &dry),
            d("write_note", &a, None, &dry)
        );
        let changed = serde_json::json!({"path": "A.md", "sha256": "2"});
        assert_ne!(
            d("delete_note", &a, None, &dry),
            d("delete_note", &a, None, &changed),
            "the note changed since the person was asked"
        );
    }

    #[test]
    fn a_digest_names_the_resolved_path_not_its_spelling() {
        let dry = serde_json::json!({"path": "Notes/A.md", "sha256": "1"});
        let bare = obj(serde_json::json!({"path": "Notes/A"}));
        let full = obj(serde_json::json!({"path": "Notes/A.md"}));
        assert_eq!(
            digest("delete_note", &bare, None, &dry),
            digest("delete_note", &full, None, &dry)
        );
        let moved = serde_json::json!({"from": "Projects", "to": "Archive/Projects"});
        assert_eq!(
            digest(
                "move_note",
                &obj(serde_json::json!({"from": "Projects/", "to": "Archive/Projects"})),
                None,
                &moved
            ),
            digest(
                "move_note",
                &obj(serde_json::json!({"from": "Projects", "to": "Archive/Projects/"})),
                None,
                &moved
            )
        );
        // What the dry run does not echo still counts.
        let permanent = obj(serde_json::json!({"path": "Notes/A", "permanent": true}));
        assert_ne!(
            digest("delete_note", &bare, None, &dry),
            digest("delete_note", &permanent, None, &dry)
        );
    }

    #[test]
    fn the_question_counts_in_the_singular_when_there_is_one() {
        let args = obj(serde_json::json!({"from": "a", "to": "b"}));
        let dry = serde_json::json!({"from": "a", "to": "b", "notes": ["n.md"], "occurrences": 1});
        let s = summary("rename_tag", &args, &dry);
        assert!(s.ends_with("in 1 note (1 place)."), "{s}");
        let dry = serde_json::json!({"from": "a", "to": "b", "notes": ["n.md", "m.md"], "occurrences": 3});
        assert!(summary("rename_tag", &args, &dry).ends_with("in 2 notes (3 places)."));
        let moved =
            serde_json::json!({"from": "F", "to": "G", "files_moved": 1, "links_updated": 1});
        let s = summary("move_note", &args, &moved);
        assert!(
            s.ends_with(": 1 file, 1 link rewritten in other notes."),
            "{s}"
        );
        let written = serde_json::json!({"path": "n.md", "diff": "--- a\n+++ b\n-x\n+y\n"});
        let s = summary("write_note", &args, &written);
        assert!(s.contains("(1 line added, 1 removed)"), "{s}");
    }

    #[test]
    fn a_client_chosen_path_cannot_fake_a_clause_or_reverse_the_count_in_the_question() {
        let args = obj(serde_json::json!({"from": "Projects"}));
        let dry = serde_json::json!({
            "from": "Projects",
            "to": "x` (an empty folder): 0 files. Allow? `\u{202E}",
            "files_moved": 12,
            "links_updated": 3
        });
        let s = summary("move_note", &args, &dry);
        assert_eq!(
            s,
            "Move the folder \"\u{2068}Projects\u{2069}\" to \"\u{2068}x` (an empty folder): 0 \
             files. Allow? `[U+202E]\u{2069}\": 12 files, 3 links rewritten in other notes."
        );
        assert!(!s.contains('\u{202E}'), "{s}");
        let (message, _) = question("My\u{202E}Vault", &s);
        assert!(
            message
                .starts_with("An assistant wants to change your vault \"\u{2068}My[U+202E]Vault"),
            "{message}"
        );
    }

    #[test]
    fn only_an_accept_with_the_box_ticked_is_a_yes() {
        let r = |action, content: Option<Value>| {
            let mut r = ElicitResult::new(action);
            r.content = content;
            matches!(decide(&r), Answer::Yes)
        };
        assert!(r(
            ElicitationAction::Accept,
            Some(serde_json::json!({"allow": true}))
        ));
        assert!(!r(
            ElicitationAction::Accept,
            Some(serde_json::json!({"allow": false}))
        ));
        assert!(!r(
            ElicitationAction::Accept,
            Some(serde_json::json!({"allow": "true"}))
        ));
        assert!(!r(ElicitationAction::Accept, None));
        assert!(!r(
            ElicitationAction::Decline,
            Some(serde_json::json!({"allow": true}))
        ));
        assert!(!r(ElicitationAction::Cancel, None));
    }

    #[test]
    fn if_match_is_required_only_of_changes_that_take_it() {
        let none = obj(serde_json::json!({"path": "A.md"}));
        let empty = obj(serde_json::json!({"path": "A.md", "if_match": ""}));
        let given = obj(serde_json::json!({"path": "A.md", "if_match": "ab"}));
        let dry = obj(serde_json::json!({"path": "A.md", "dry_run": true}));
        assert!(lacks_if_match(true, &none));
        assert!(lacks_if_match(true, &empty));
        assert!(!lacks_if_match(true, &given));
        assert!(!lacks_if_match(true, &dry));
        assert!(!lacks_if_match(false, &none));
    }
}
