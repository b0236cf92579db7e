//! Reading runs from files: a JSON document (or several) when the text starts with `{`, a text
//! log otherwise. A container's log as Docker's `json-file` driver keeps it (one
//! `{"log":"...","stream":...,"time":...}` object a line, as found under
//! `/var/lib/docker/containers/`) is read as the text it holds.

use super::json;
use super::parse::{self, ParseOptions};
use super::run::{ReadError, Run};

/// Reads every run of a file's contents: a JSON document (or several, one after the other) when
/// the text starts with `{`, a text log otherwise.
pub fn read_runs(text: &str, file: &str, options: &ParseOptions) -> Result<Vec<Run>, ReadError> {
    // A byte-order mark (an editor's, PowerShell's) is not part of the text.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !text.trim_start().starts_with('{') {
        parse::parse_log(text, file, options)
    } else if let Some(log) = container_log(text) {
        parse::parse_log(&log, file, options)
    } else {
        json::read::read_documents(text, file)
    }
}

/// The text of a Docker `json-file` log: every line a JSON object whose `log` string is a
/// piece of the container's output (a line with its newline, or part of a long one); `None`
/// when the first line is not such an object (a nccl-tests JSON document). Lines that are not
/// such objects are kept as they are.
fn container_log(text: &str) -> Option<String> {
    let piece = |line: &str| -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        value.get("log")?.as_str().map(str::to_string)
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let mut out = piece(lines.next()?)?;
    for line in lines {
        match piece(line) {
            Some(p) => out += &p,
            None => {
                out += line;
                out.push('\n');
            }
        }
    }
    Some(out)
}

/// [`read_runs`] of a file on disk (`-` reads standard input). Bytes that are not UTF-8 are
/// replaced, so a binary file is reported as "no nccl-tests output", not as an I/O error; a file
/// that starts with a UTF-16 byte-order mark (Windows PowerShell's `>` writes UTF-16) is read
/// as UTF-16.
pub fn read_file(path: &str, options: &ParseOptions) -> Result<Vec<Run>, ReadError> {
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .map_err(|e| ReadError::whole(path, format!("cannot read standard input: {e}")))?;
        buf
    } else {
        std::fs::read(path).map_err(|e| ReadError::whole(path, format!("cannot read: {e}")))?
    };
    read_runs(&decode(&bytes), path, options)
}

/// A file's text: UTF-16 after its byte-order mark, else UTF-8 (invalid bytes replaced).
fn decode(bytes: &[u8]) -> String {
    let utf16 = |rest: &[u8], unit: fn([u8; 2]) -> u16| -> String {
        char::decode_utf16(rest.chunks_exact(2).map(|c| unit([c[0], c[1]])))
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    };
    match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}
