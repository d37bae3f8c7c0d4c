//! reports: plots (SVG and PNG) and summaries (JSON with a stable schema, Markdown, self-contained HTML) from recorded runs.
