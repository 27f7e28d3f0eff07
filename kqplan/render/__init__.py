"""Views: they take values and return text, and decide nothing. A plan as text (terraform's markers),
Markdown (PR comments) and JSON; GitHub workflow annotations; an apply report as text and as its
``--report`` JSON; a blast radius; diagnostics as JSON and annotations; fleet rightsize's proposals
as Markdown. Whatever reaches a destination is escaped there by the one function ``escape`` has for
it. Imports ``core`` and ``planfile`` only."""
