"""What a run would cost before it starts: from past runs, or a paid sample."""
