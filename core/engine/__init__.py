"""One step, from graph IR to kernels: the step graph (IR), placement and its cost
model, partitioning with Send/Recv pairs, the executor, the rendezvous.

See docs/architecture.md for the layers and what each module owns.
"""
