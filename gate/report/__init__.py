"""The verdict as people read it: one markdown document (PR comment and job summary) from
a Jinja2 template, fitted to GitHub's size limit, every untrusted string escaped; the
terminal summary, charts and exports to other tools' formats."""
