-- Our addition beside the protocol's statements (adding one moves no
-- version): the JSON of the tasks :ids (text[]) as the server keeps it,
-- for the tasks of a batch written by COPY whose text the SDK does not
-- predict itself. The ids are unnested and joined rather than matched
-- with = ANY, so that a generic plan reads each by the primary key
-- whatever the statistics say of the table.
SELECT t.id, t.payload, t.metadata
FROM unnest(CAST(:ids AS text[])) AS w(id)
JOIN cairnq_tasks AS t ON t.id = w.id;
