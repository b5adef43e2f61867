"""The three-round review: reviewer files, consensus under data rules, agreement, checks, promotion, audit.

Public names: `load_rules`, `load_ledger`, `round_outcome`, `agreement`, `all_trails`, `funnel`,
`write_audit`, `promote`, `DEFAULT_CHECKS`, `CheckContext`, `CheckOutcome`.
"""
from mmbu.curation.review.agreement import agreement
from mmbu.curation.review.checks import DEFAULT_CHECKS, CheckContext, CheckOutcome
from mmbu.curation.review.consensus import round_outcome
from mmbu.curation.review.ledger import load_ledger
from mmbu.curation.review.promotion import promote
from mmbu.curation.review.rules import load_rules
from mmbu.curation.review.trail import all_trails, funnel, write_audit

__all__ = ["DEFAULT_CHECKS", "CheckContext", "CheckOutcome", "agreement", "all_trails", "funnel", "load_ledger",
           "load_rules", "promote", "round_outcome", "write_audit"]
