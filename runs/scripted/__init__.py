"""Models played by a script, with no Django: the agent's model that the fake
model server and the offline demo agent share."""
