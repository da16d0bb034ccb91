"""Export stage: TorchScript and ONNX for every attention variant, CTranslate2 for the vanilla baseline.

Every target runs check support -> build -> verify -> manifest (see `export.pipeline`); the
exported directories carry the SentencePiece model and the language pair so that a runtime can
serve them alone (`export.exported_dir`, `export.runners`).
"""
