//! The model folders' input format, shared by `model_files` and `transformer_files`.

/// Cuts `data` into a model folder's three files: two little-endian lengths (u16 for
/// `config.json`, u32 for `tokenizer.json`), the two files, then `model.safetensors` (the rest).
/// `None` when the lengths run past the end.
pub fn three_files(data: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let config_len = usize::from(u16::from_le_bytes([*data.first()?, *data.get(1)?]));
    let tok_len = u32::from_le_bytes(data.get(2..6)?.try_into().ok()?) as usize;
    let rest = &data[6..];
    let config = rest.get(..config_len)?;
    let rest = &rest[config_len..];
    let tokenizer = rest.get(..tok_len)?;
    Some((config, tokenizer, &rest[tok_len..]))
}
