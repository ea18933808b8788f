"""ibnetdiscover output -> Fabric. `reader.parse` reads a dump into a `dump.Dump` (`columns`
and `cables` read ibnetdiscover's own layout a window at a time; anything else, or a problem to
name, goes line by line); `domains.derive` joins its HCAs to the nodes by GUID (`guids`), counts
each node's HCAs per leaf (`reaches`) and makes the leaf and spine domains."""
