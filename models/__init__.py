"""Reference models trained with flfun's public API: ``mlp`` and ``cnn`` on scikit-learn's 8x8 digits, and a
character-level GPT (``transformer``) on the Python standard library's source. Train one with
``python -m models.train {mlp,cnn,transformer}``."""
