//! The text report: header, device lines, table header, rows and footer.
