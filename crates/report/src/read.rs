//! Reading runs from files: a JSON document (or several) when the text starts with `{`, a text
//! log otherwise.

use super::json;
use super::parse::{self, ParseOptions};
use super::run::{ReadError, Run};

/// Reads every run of a file's contents: a JSON document (or several, one after the other) when
/// the text starts with `{`, a text log otherwise.
pub fn read_runs(text: &str, file: &str, options: &ParseOptions) -> Result<Vec<Run>, ReadError> {
    if text.trim_start().starts_with('{') {
        json::read::read_documents(text, file)
    } else {
        parse::parse_log(text, file, options)
    }
}

/// [`read_runs`] of a file on disk (`-` reads standard input). Bytes that are not UTF-8 are
/// replaced, so a binary file is reported as "no nccl-tests output", not as an I/O error.
pub fn read_file(path: &str, options: &ParseOptions) -> Result<Vec<Run>, ReadError> {
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .map_err(|e| ReadError::whole(path, format!("cannot read standard input: {e}")))?;
        buf
    } else {
        std::fs::read(path).map_err(|e| ReadError::whole(path, format!("cannot read: {e}")))?
    };
    read_runs(&String::from_utf8_lossy(&bytes), path, options)
}
