"""Built-in vertex programs, each with a one-call function returning a Result."""

from .bfs import BreadthFirst, bfs
from .cc import MinLabel, connected_components
from .circuit import Circuit, circuit
from .heat import HeatDiffusion, heat
from .nn import NeuralNetwork, nn
from .pagerank import PageRank, pagerank
from .sssp import ShortestPaths, sssp

__all__ = [
    "pagerank", "sssp", "bfs", "connected_components", "nn", "heat", "circuit", "PageRank",
    "ShortestPaths", "BreadthFirst", "MinLabel", "NeuralNetwork", "HeatDiffusion", "Circuit",
]
