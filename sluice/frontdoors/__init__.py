"""Front doors: one wire protocol each, a decoder and an encoder over the exchange
(:class:`~sluice.exchange.ports.FrontDoor`)."""
