"""Group placement by flow: model < decision < framework < extensions < admission and placer."""

# A group goes: admission (gate, label) -> the placer: domain -> nodes -> ranks -> ungate. Each room
# imports only rooms before it; admission and placer do not import each other; each package in
# extensions/ is a room of its own (tests/webhook/groups/test_layers.py).
