//! Dataview's settings that change answers (`.obsidian/plugins/dataview/data.json`).

/// The settings, with Dataview's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct DataviewSettings {
    /// `defaultDateFormat` (Luxon tokens).
    pub date_format: String,
    /// `defaultDateTimeFormat`.
    pub datetime_format: String,
    /// `taskCompletionTracking`: completing a task adds a completion date.
    pub task_completion_tracking: bool,
    /// `taskCompletionUseEmojiShorthand`: as `✅ date` instead of an inline field.
    pub task_completion_use_emoji_shorthand: bool,
    /// `taskCompletionText`: the inline field's key.
    pub task_completion_text: String,
    /// `taskCompletionDateFormat`.
    pub task_completion_date_format: String,
    /// `tableIdColumnName`.
    pub table_id_column_name: String,
    /// `tableGroupColumnName`.
    pub table_group_column_name: String,
    /// `renderNullAs`.
    pub render_null_as: String,
    /// `inlineQueryPrefix`.
    pub inline_query_prefix: String,
    /// `inlineJsQueryPrefix` (such queries are refused).
    pub inline_js_query_prefix: String,
    /// `showResultCount`.
    pub show_result_count: bool,
}

impl Default for DataviewSettings {
    fn default() -> Self {
        DataviewSettings {
            date_format: "MMMM dd, yyyy".into(),
            datetime_format: "h:mm a - MMMM dd, yyyy".into(),
            task_completion_tracking: false,
            task_completion_use_emoji_shorthand: false,
            task_completion_text: "completion".into(),
            task_completion_date_format: "yyyy-MM-dd".into(),
            table_id_column_name: "File".into(),
            table_group_column_name: "Group".into(),
            render_null_as: "\\-".into(),
            inline_query_prefix: "=".into(),
            inline_js_query_prefix: "$=".into(),
            show_result_count: true,
        }
    }
}

/// Largest settings file read.
pub const MAX_SETTINGS_BYTES: usize = 1 << 20;

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("data.json is larger than {MAX_SETTINGS_BYTES} bytes")]
    TooLarge,
    #[error("data.json is not a JSON object: {0}")]
    Json(#[from] serde_json::Error),
}

impl DataviewSettings {
    /// Reads `data.json`; keys missing or of the wrong type keep their defaults.
    pub fn from_json(bytes: &[u8]) -> Result<DataviewSettings, SettingsError> {
        if bytes.len() > MAX_SETTINGS_BYTES {
            return Err(SettingsError::TooLarge);
        }
        let v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(bytes)?;
        let mut s = DataviewSettings::default();
        let text = |k: &str, slot: &mut String| {
            if let Some(t) = v.get(k).and_then(|x| x.as_str()) {
                *slot = t.to_owned();
            }
        };
        text("defaultDateFormat", &mut s.date_format);
        text("defaultDateTimeFormat", &mut s.datetime_format);
        text("taskCompletionText", &mut s.task_completion_text);
        text(
            "taskCompletionDateFormat",
            &mut s.task_completion_date_format,
        );
        text("tableIdColumnName", &mut s.table_id_column_name);
        text("tableGroupColumnName", &mut s.table_group_column_name);
        text("renderNullAs", &mut s.render_null_as);
        text("inlineQueryPrefix", &mut s.inline_query_prefix);
        text("inlineJsQueryPrefix", &mut s.inline_js_query_prefix);
        let flag = |k: &str, slot: &mut bool| {
            if let Some(b) = v.get(k).and_then(|x| x.as_bool()) {
                *slot = b;
            }
        };
        flag("taskCompletionTracking", &mut s.task_completion_tracking);
        flag(
            "taskCompletionUseEmojiShorthand",
            &mut s.task_completion_use_emoji_shorthand,
        );
        flag("showResultCount", &mut s.show_result_count);
        Ok(s)
    }
}
