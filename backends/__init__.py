"""Language-model backends behind one batched protocol (Hugging Face, vLLM, OpenAI-compatible)."""
