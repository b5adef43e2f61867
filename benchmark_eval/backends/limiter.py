"""An adaptive concurrency limit for rate-limited APIs (AIMD, the way TCP and inspect_ai do it).

The limit starts at the user's ``--concurrency`` (the ceiling). Each *episode* of 429s (429s
closer together than `cooldown_s` count as one) multiplies it by `decrease` (0.8); every success
adds ``1/limit`` so it creeps back up by about one slot per round of requests. Server errors
(5xx) and timeouts say nothing about quota and do not shrink it.
"""
from __future__ import annotations

import asyncio
import time


class AdaptiveConcurrency:
    def __init__(
        self,
        maximum: int,
        *,
        minimum: int = 1,
        decrease: float = 0.8,
        cooldown_s: float = 5.0,
    ) -> None:
        if maximum < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self.maximum, self.minimum = maximum, min(minimum, maximum)
        self.decrease, self.cooldown_s = decrease, cooldown_s
        self.limit = float(maximum)
        self.in_flight = 0
        self.rate_limit_episodes = 0
        self._last_decrease = -float("inf")
        self._condition: asyncio.Condition | None = None

    @property
    def current(self) -> int:
        return max(self.minimum, int(self.limit))

    def _cond(self) -> asyncio.Condition:
        if self._condition is None:
            self._condition = asyncio.Condition()
        return self._condition

    async def __aenter__(self) -> AdaptiveConcurrency:
        condition = self._cond()
        async with condition:
            await condition.wait_for(lambda: self.in_flight < self.current)
            self.in_flight += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        condition = self._cond()
        async with condition:
            self.in_flight -= 1
            # Wake only as many waiters as there are free slots (notify_all would stampede).
            condition.notify(max(1, self.current - self.in_flight))

    def on_success(self) -> None:
        self.limit = min(float(self.maximum), self.limit + 1.0 / max(self.limit, 1.0))

    def on_rate_limited(self) -> None:
        now = time.monotonic()
        if now - self._last_decrease < self.cooldown_s:
            return  # the same episode: one decrease per burst of 429s
        self._last_decrease = now
        self.rate_limit_episodes += 1
        self.limit = max(float(self.minimum), self.limit * self.decrease)
