"""Reactive placement of one iteration's pages on CPU and GPU workers (Garaph 5.1).

Pages wait in one queue. A GPU worker that frees takes a batch from the front (resident
pages first, so the GPU streams as little as possible); a CPU worker that frees takes
one page from the back. A CPU takes a page only when it is predicted to finish it before
the GPU workers finish everything else, so the slower device never holds up the
iteration; a GPU batch is large enough that the task overhead stays under
``OVERHEAD_SHARE`` of its work, but at most half of what is left, so both devices still
share the tail.
"""

from __future__ import annotations

from collections import deque

OVERHEAD_SHARE = 0.05  # largest share of a GPU task's time spent in task overhead


class PageQueue:
    """The pages of one iteration and who takes which.

    ``page_edges``: edges of every page to compute (index = page number); ``model``: the
    :class:`CostModel`; ``round_trip``: measured seconds of one task round trip;
    ``gpu_workers``: how many GPU workers share the GPU work (0 = CPU only).
    """

    def __init__(self, page_edges, model, round_trip, gpu_workers):
        self.pages = deque(range(len(page_edges)))
        self.edges = page_edges
        self.model = model
        self.round_trip = round_trip
        self.gpu_workers = gpu_workers
        self.gpu_pending = 0.0  # predicted seconds of the GPU batches not finished yet

    def __len__(self):
        return len(self.pages)

    def _gpu_seconds(self, page):
        return self.model.seconds("gpu", int(self.edges[page]))

    def remaining_gpu_seconds(self):
        """Predicted seconds for the GPU workers to finish their batches and the queue."""
        queued = sum(self._gpu_seconds(p) for p in self.pages)
        return (self.gpu_pending + queued) / max(self.gpu_workers, 1)

    def take_gpu(self):
        """The next GPU batch (increasing page numbers), or [] when the queue is empty."""
        if not self.pages:
            return []
        target = self.round_trip / OVERHEAD_SHARE
        half = sum(self._gpu_seconds(p) for p in self.pages) / 2
        enough = min(target, half) * (1 - 1e-9)  # a sum of page times may round down
        batch, seconds = [], 0.0
        while self.pages and (not batch or seconds < enough):
            page = self.pages.popleft()
            batch.append(page)
            seconds += self._gpu_seconds(page)
        self.gpu_pending += seconds
        return batch

    def gpu_done(self, batch):
        self.gpu_pending = max(0.0, self.gpu_pending - sum(self._gpu_seconds(p)
                                                           for p in batch))

    def take_cpu(self):
        """The next CPU page as a one-page list, or [] when none is worth taking."""
        if not self.pages:
            return []
        page = self.pages[-1]
        if self.gpu_workers:
            cpu = self.model.seconds("cpu", int(self.edges[page]))
            self.pages.pop()
            after = self.remaining_gpu_seconds()
            if cpu > after + self._gpu_seconds(page) / max(self.gpu_workers, 1):
                self.pages.append(page)  # the GPU would finish it sooner
                return []
            return [page]
        return [self.pages.pop()]
