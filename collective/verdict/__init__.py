"""The verdict, decided from data: claims checked, answers reduced and agreed on, figures compared.

Fed data, not prompt text: the chunks as each model was shown them (`support.Shown`), the
answers as written, and the KB's `Vocabulary` (its names and figures by property). The judge
node (`collective.nodes.judge`) makes the calls and hands their results here:

- `support`: a claim checked against the chunks shown (does a chunk about its thing state it?);
- `agreement`: each answer reduced to its answer to the question, and the one most give, among
  those the KB supports, stands;
- `comparison`: which of the things named is highest or lowest on the property asked;
- `lines`: the verdict's supporting lines, sentences of the cited chunks as shown;
- `entailment`: the judge's own model asked what numbers and names cannot settle.
"""
