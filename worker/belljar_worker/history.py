"""The session's input and output history in its namespace, as IPython keeps it: In and Out
(with _ih and _oh), _i/_ii/_iii and _iN for inputs, _/__/___ and _N for values.

Only these names are touched, and only in the namespace given: the history a frontend shows
lives in the supervisor, which keeps it across worker restarts. A name the user assigned
(_ = 5) is theirs from then on, as in IPython.
"""

# The names History puts in the namespace; the session hides them from the user's (%who).
NAMES = ("In", "Out", "_ih", "_oh", "_", "__", "___", "_i", "_ii", "_iii")


class History:
    def __init__(self, namespace):
        self._namespace = namespace
        self.In, self.Out = [""], {}
        self._unders = ("", "", "")       # _, __, ___ as the history last set them
        self._last_inputs = ("", "", "")  # _i, _ii, _iii
        self._latest_input = ""
        namespace.update(In=self.In, Out=self.Out, _ih=self.In, _oh=self.Out,
                         _="", __="", ___="", _i="", _ii="", _iii="")

    def store_input(self, count, parsed, raw):
        """Cell `count`'s input: In[count] the code that runs, _iN what the user typed."""
        if count is None:
            return
        ns = self._namespace
        while len(self.In) <= count:
            self.In.append("")
        self.In[count] = parsed
        # As in IPython: while cell N runs, _i is cell N-1's input and _iN its own.
        previous = self._last_inputs
        self._last_inputs = (self._latest_input, previous[0], previous[1])
        self._latest_input = raw
        ns["_i"], ns["_ii"], ns["_iii"] = self._last_inputs
        ns["_i%d" % count] = raw

    def store_output(self, count, value):
        """A cell's value: _ (the older ones moved to __ and ___), Out[count] and _N."""
        ns = self._namespace
        # Like IPython: once the user assigns _ (or __, ___) themselves, leave them alone.
        if all(ns.get(name, mine) is mine for name, mine in zip(("_", "__", "___"), self._unders)):
            self._unders = (value, self._unders[0], self._unders[1])
            ns["_"], ns["__"], ns["___"] = self._unders
        if count is not None:
            self.Out[count] = value
            ns["_%d" % count] = value
