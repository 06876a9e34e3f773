"""Orders of base models with early exits: QWYC (Quit When You Can)."""

from thrifty.order.qwyc import QWYCResult, qwyc, qwyc_scores

__all__ = ["QWYCResult", "qwyc", "qwyc_scores"]
