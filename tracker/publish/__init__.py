"""Publish what the analysis found: the summary, the HTML report, the offline asv site, the PR comment body."""
