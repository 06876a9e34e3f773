"""Training-time methods: models that meet a feature budget from the start (CEGB, GreedyMiser,
BudgetRF, ADAPT)."""
