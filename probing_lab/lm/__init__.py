"""The biLM as a language model: score sentences with each direction, predict the next and the
previous word, and targeted syntactic evaluation (subject-verb agreement minimal pairs)."""
