"""Post to GitHub: the REST client, one upsert-by-marker for the PR comment and the tracking issue, the PR flow."""
