"""Trained models as their libraries save them (trusted): safetensors read without PyTorch or
pickle, Hugging Face folders, nanoGPT and ``nn.MultiheadAttention`` state dicts, each mapped to
the exact IR."""
